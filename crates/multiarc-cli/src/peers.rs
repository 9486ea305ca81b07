//! Adapters for the peer caches (being written).
