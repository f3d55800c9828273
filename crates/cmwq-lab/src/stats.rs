//! Statistics for A/B comparisons (to be written).
