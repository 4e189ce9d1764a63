//! Path mathematics with no I/O: bandwidth-delay product, socket buffers, TCP response
//! models (Reno, Mathis, CUBIC, HighSpeed TCP), router buffers and the Land Speed Record metric.
