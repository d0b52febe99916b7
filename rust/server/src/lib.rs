//! HTTP server
