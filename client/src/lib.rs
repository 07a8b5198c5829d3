//! The one HTTP client of Baton's API (being moved here).
