//! Block trace readers (being written).
