"""Pure decision functions: admission, placement and reclaim over a snapshot and a request."""
