//! The scenarios shipped in `examples/`, by name, and the files they refer to.
