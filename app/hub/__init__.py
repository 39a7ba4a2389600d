"""Files from the hub to disk: hub client -> download -> store -> pull. Draws nothing."""
