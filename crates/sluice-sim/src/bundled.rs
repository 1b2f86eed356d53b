//! The scenarios shipped in `examples/`, by name, and the files they refer to.
//!
//! Every front end that runs scenarios — `sluice sim`, `sluice sweep`,
//! `sluice bench sim` and the Python package — accepts the name of a
//! bundled scenario wherever it accepts a file, and finds the same text
//! here: the files are compiled in, so a name works from any directory and
//! needs no checkout of the repository. A scenario's name is its file's
//! name without `.toml`, and its `name` key says the same (a test below
//! holds both, and that every file in `examples/` is here).
//!
//! Some scenarios run shell scripts on their nodes (`script = "NAME.sh"`):
//! [`file`] gives those scripts' text by the name the scenario uses, so a
//! runner looks a script up here before it looks on disk. Running one needs
//! bash and the `sluice` binary's `tc` and `iptables`; a front end without
//! them (the Python package) refuses such a scenario rather than run part
//! of it.
//!
//! Six scenarios and their scripts had other names before (`seed000` ...
//! `seed004-gateway`, `seed003-htb.sh` ...); those names still resolve, so
//! that commands written with them keep working, but [`names`] does not
//! list them.

/// The bundled scenarios, by name, in the order `sluice sim --list` shows.
const SCENARIOS: &[(&str, &str)] = &[
    ("dumbbell", include_str!("../../../examples/dumbbell.toml")),
    (
        "http2-pageload-delay",
        include_str!("../../../examples/http2-pageload-delay.toml"),
    ),
    (
        "per-host-fairness",
        include_str!("../../../examples/per-host-fairness.toml"),
    ),
    (
        "cable-upload-tbf",
        include_str!("../../../examples/cable-upload-tbf.toml"),
    ),
    (
        "ultimate-traffic-conditioner",
        include_str!("../../../examples/ultimate-traffic-conditioner.toml"),
    ),
    (
        "lan-bufferbloat",
        include_str!("../../../examples/lan-bufferbloat.toml"),
    ),
    (
        "home-gateway-htb",
        include_str!("../../../examples/home-gateway-htb.toml"),
    ),
    (
        "tsn-taprio",
        include_str!("../../../examples/tsn-taprio.toml"),
    ),
    (
        "lte-drive",
        include_str!("../../../examples/lte-drive.toml"),
    ),
    (
        "starlink-handover",
        include_str!("../../../examples/starlink-handover.toml"),
    ),
    (
        "policy-change",
        include_str!("../../../examples/policy-change.toml"),
    ),
];

/// The files bundled scenarios refer to (their node scripts), by name.
const FILES: &[(&str, &str)] = &[
    (
        "per-host-fairness.sh",
        include_str!("../../../examples/per-host-fairness.sh"),
    ),
    (
        "ultimate-traffic-conditioner-htb.sh",
        include_str!("../../../examples/ultimate-traffic-conditioner-htb.sh"),
    ),
    (
        "ultimate-traffic-conditioner-cbq.sh",
        include_str!("../../../examples/ultimate-traffic-conditioner-cbq.sh"),
    ),
    (
        "home-gateway.sh",
        include_str!("../../../examples/home-gateway.sh"),
    ),
];

/// Former names of scenarios and scripts, and the names they have now.
const FORMER: &[(&str, &str)] = &[
    ("seed000", "http2-pageload-delay"),
    ("seed001", "per-host-fairness"),
    ("seed002", "cable-upload-tbf"),
    ("seed003", "ultimate-traffic-conditioner"),
    ("seed004", "lan-bufferbloat"),
    ("seed004-gateway", "home-gateway-htb"),
    ("seed001-hostfair.sh", "per-host-fairness.sh"),
    ("seed003-htb.sh", "ultimate-traffic-conditioner-htb.sh"),
    ("seed003-cbq.sh", "ultimate-traffic-conditioner-cbq.sh"),
    ("seed004-gateway.sh", "home-gateway.sh"),
];

/// `name`, or the name it has now if it is a former one.
fn current(name: &str) -> &str {
    FORMER
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name, |(_, new)| new)
}

fn lookup(table: &'static [(&str, &str)], name: &str) -> Option<&'static str> {
    let name = current(name);
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// The text of the bundled scenario `name`, if there is one.
pub fn scenario(name: &str) -> Option<&'static str> {
    lookup(SCENARIOS, name)
}

/// The text of the file `name` a bundled scenario refers to (a node
/// script), if there is one.
pub fn file(name: &str) -> Option<&'static str> {
    lookup(FILES, name)
}

/// The bundled scenarios' names, in the order `sluice sim --list` shows.
pub fn names() -> impl Iterator<Item = &'static str> {
    SCENARIOS.iter().map(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use std::path::PathBuf;

    fn examples() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
    }

    #[test]
    fn every_example_is_bundled_under_its_own_name() {
        let mut files: Vec<String> = std::fs::read_dir(examples())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        for f in &files {
            if let Some(name) = f.strip_suffix(".toml") {
                let text = scenario(name).unwrap_or_else(|| panic!("{f} is not bundled"));
                assert_eq!(Scenario::parse(text).unwrap().name, name, "{f}'s name key");
            }
        }
        assert_eq!(
            names().count(),
            files.iter().filter(|f| f.ends_with(".toml")).count()
        );
    }

    #[test]
    fn every_script_a_bundled_scenario_names_is_bundled() {
        for (name, text) in SCENARIOS {
            for word in text.split(['"', ' ', '\n']) {
                if word.ends_with(".sh") {
                    assert!(file(word).is_some(), "{name}: {word} is not bundled");
                }
            }
        }
        assert_eq!(file("home-gateway.sh"), Some(FILES[3].1));
    }

    #[test]
    fn former_names_resolve_but_are_not_listed() {
        assert_eq!(scenario("seed002"), scenario("cable-upload-tbf"));
        assert!(scenario("seed002").is_some());
        assert_eq!(
            file("seed003-htb.sh"),
            file("ultimate-traffic-conditioner-htb.sh")
        );
        assert!(names().all(|n| !n.starts_with("seed")));
        for (old, new) in FORMER {
            assert!(
                scenario(new).is_some() || file(new).is_some(),
                "{old} -> {new}"
            );
        }
        assert_eq!(scenario("no-such"), None);
    }
}
