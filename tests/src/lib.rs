//! Host-side shims shared by the integration tests.
