"""From names to a running engine, and what runs on one: `dspine run`, `bench`."""
