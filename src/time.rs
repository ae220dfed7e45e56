//! Time as the sans-IO core sees it: milliseconds of a monotonic clock, passed in by whoever
//! drives it (the server's driver, or a simulation's clock). Nothing in the core reads a
//! clock.

/// Milliseconds of a monotonic clock, supplied by the caller.
pub type Millis = u64;
