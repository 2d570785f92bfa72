//! Host counters (`<hostname>/<counter>`) and structured row names.
