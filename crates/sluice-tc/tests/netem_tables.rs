//! netem's embedded distribution tables against the ones iproute2 installs.
//! (Kept out of sluice-core, which reads no files.)

/// Where iproute2 is installed, its tables are ours (they are generated
/// when iproute2 is built, so this checks the C programs' arithmetic
/// against ours on another build).
#[test]
fn the_embedded_tables_are_the_installed_ones_where_iproute2_is_installed() {
    for dir in [
        "/usr/lib/x86_64-linux-gnu/tc",
        "/usr/lib/tc",
        "/usr/lib64/tc",
    ] {
        for name in ["normal", "pareto", "paretonormal"] {
            let path = format!("{dir}/{name}.dist");
            if let Ok(text) = std::fs::read_to_string(&path) {
                assert_eq!(
                    text,
                    sluice_core::qdisc::netem::dist::builtin_text(name).unwrap(),
                    "{path}"
                );
            }
        }
    }
}
