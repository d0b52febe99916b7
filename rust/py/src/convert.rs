//! Python object <-> serde_json::Value conversion (no JSON text crosses the boundary).
