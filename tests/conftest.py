# The emulator's fixtures, as users enable them in their own conftest.py.
pytest_plugins = ["agent.testing.pytest_plugin"]
