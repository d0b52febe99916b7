//! bridge
