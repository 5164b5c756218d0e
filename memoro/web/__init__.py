"""``memoro serve``: the HTTP API, the settings pages and their assets."""
