//! `sluice completions bash|zsh|fish|elvish|powershell` and `sluice
//! manpages DIR`: shell completions and manual pages generated from the same
//! clap definitions the subcommands parse with, so they cannot disagree.
//!
//! `tc`, `ip` and `iptables` speak iproute2's and iptables' own languages
//! (positional, abbreviable: not clap's), so their completion is the word
//! after them only, and their manual pages are iproute2's and iptables'.

use clap::{Arg, ArgAction, Command, CommandFactory};
use clap_complete::Shell;
use std::path::Path;

/// A subcommand whose words are another tool's language.
fn passthrough(name: &'static str, about: &'static str) -> Command {
    Command::new(name).about(about).arg(
        Arg::new("args")
            .num_args(0..)
            .trailing_var_arg(true)
            .allow_hyphen_values(true)
            .action(ArgAction::Append),
    )
}

/// The whole command line, as one clap tree.
pub fn cli() -> Command {
    let shells = ["bash", "zsh", "fish", "elvish", "powershell"];
    Command::new("sluice")
        .about("Linux Traffic Control in userspace: tc, a simulator, live links, a Toxiproxy-compatible proxy")
        .subcommand_required(true)
        .subcommand(passthrough("tc", "iproute2's tc: qdiscs, classes, filters, actions"))
        .subcommand(passthrough("ip", "iproute2's ip: links, addresses, routes (what tc needs)"))
        .subcommand(passthrough("iptables", "iptables' filter and mangle tables"))
        .subcommand(crate::sim::SimArgs::command().name("sim"))
        .subcommand(crate::sweep::SweepArgs::command().name("sweep"))
        .subcommand(crate::replay::ReplayArgs::command().name("replay"))
        .subcommand(crate::live::LinkCli::command().name("link"))
        .subcommand(crate::live::ShellCli::command().name("shell"))
        .subcommand(passthrough("mm-link", "Mahimahi's mm-link: a link that follows delivery-opportunity traces"))
        .subcommand(passthrough("mm-delay", "Mahimahi's mm-delay: a fixed one-way delay"))
        .subcommand(passthrough("mm-loss", "Mahimahi's mm-loss: random loss in one direction"))
        .subcommand(crate::proxy::ProxyArgs::command().name("proxy"))
        .subcommand(passthrough("bench", "qdisc, simulator, state, live and proxy benchmarks"))
        .subcommand(
            Command::new("shims")
                .about("Write tc, ip, iptables and mm-* scripts running sluice into DIR")
                .arg(Arg::new("dir").required(true).value_name("DIR")),
        )
        .subcommand(
            Command::new("completions")
                .about("Print shell completions")
                .arg(Arg::new("shell").required(true).value_parser(shells)),
        )
        .subcommand(
            Command::new("manpages")
                .about("Write sluice.1 and a page per subcommand into DIR")
                .arg(Arg::new("dir").required(true).value_name("DIR")),
        )
}

/// `sluice completions SHELL`.
pub fn completions_main(args: &[String]) -> i32 {
    let shell = match args {
        [s] => s.parse::<Shell>().ok(),
        _ => None,
    };
    let Some(shell) = shell else {
        eprintln!("usage: sluice completions bash|zsh|fish|elvish|powershell");
        return 2;
    };
    clap_complete::generate(shell, &mut cli(), "sluice", &mut std::io::stdout());
    0
}

/// `sluice manpages DIR`.
pub fn manpages_main(args: &[String]) -> i32 {
    let [dir] = args else {
        eprintln!("usage: sluice manpages DIR");
        return 2;
    };
    match write_manpages(Path::new(dir)) {
        Ok(n) => {
            println!("wrote {n} manual pages to {dir}");
            0
        }
        Err(e) => {
            eprintln!("sluice manpages: {dir}: {e}");
            1
        }
    }
}

fn write_manpages(dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let root = cli();
    let mut pages = vec![("sluice".to_string(), root.clone())];
    for sub in root.get_subcommands() {
        let name = format!("sluice-{}", sub.get_name());
        pages.push((name, sub.clone()));
    }
    for (name, cmd) in &pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd.clone())
            .title(name.as_str())
            .render(&mut out)?;
        std::fs::write(dir.join(format!("{name}.1")), out)?;
    }
    Ok(pages.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_consistent() {
        cli().debug_assert();
    }

    #[test]
    fn bash_completion_names_every_subcommand() {
        let mut out = Vec::new();
        clap_complete::generate(Shell::Bash, &mut cli(), "sluice", &mut out);
        let text = String::from_utf8(out).unwrap();
        for sub in [
            "tc", "sim", "replay", "link", "shell", "mm-link", "proxy", "shims",
        ] {
            assert!(text.contains(sub), "{sub} missing from the bash completion");
        }
        assert!(
            text.contains("--check"),
            "sim's own flags come from its clap definition"
        );
    }

    #[test]
    fn manual_pages_are_written_for_each_subcommand() {
        let d = tempfile::tempdir().unwrap();
        let n = write_manpages(d.path()).unwrap();
        assert_eq!(n, cli().get_subcommands().count() + 1);
        let sim = std::fs::read_to_string(d.path().join("sluice-sim.1")).unwrap();
        assert!(sim.contains(".TH") && sim.contains("check"), "{sim}");
    }
}
