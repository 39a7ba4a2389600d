"""What can be run: the catalog of bundles, the drafter kinds, picking files from a listing. Pure."""
