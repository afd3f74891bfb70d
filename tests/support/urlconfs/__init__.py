"""URLconfs and views of the in-process tests, one pair per subject."""
