"""Where a live session's poses go: the browser viewer, OSC (VMC), UDP/JSON, recordings."""
