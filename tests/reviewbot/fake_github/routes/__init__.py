"""Route modules of the fake GitHub, one per API area; see `ROUTE_MODULES` in `server.py`."""
