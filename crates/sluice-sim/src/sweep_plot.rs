//! Plots of a sweep's results.
