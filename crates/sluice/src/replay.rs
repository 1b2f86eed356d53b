//! PLACEHOLDER (being written): `sluice replay`.

/// Run `sluice replay`; returns the exit status.
pub fn main(_args: &[String]) -> i32 {
    eprintln!("sluice replay: not available yet");
    2
}
