"""The ``hive-bash-daemon`` program: its entry point, the ASGI app, and the HTTP edge."""
