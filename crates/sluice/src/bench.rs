//! PLACEHOLDER (being written): `sluice bench`.

/// Run `sluice bench`; returns the exit status.
pub fn main(_args: &[String]) -> i32 {
    eprintln!("sluice bench: not available yet");
    2
}
