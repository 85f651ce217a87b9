# The emulator's fixtures, as users enable them in their own conftest.py.
pytest_plugins = ["emulator.pytest_plugin"]
