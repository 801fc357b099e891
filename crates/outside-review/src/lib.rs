//! Tests an outside reviewer wrote against the public API (they read only the README and
//! rustdoc), kept as part of the suite: `tests/` (see its README section in ARCHITECTURE.md).
