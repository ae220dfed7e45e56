//! Time as the sans-IO core sees it: milliseconds of a monotonic clock, passed in by whoever
//! drives it (the server's driver, or a simulation's clock). Nothing in the core reads a
//! clock.

/// Milliseconds of a monotonic clock, supplied by the caller.
pub type Millis = u64;

/// Wall-clock time, milliseconds since the Unix epoch (0 if the clock is before it): what
/// records show as "when", never what the core decides on.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
