"""A toy event action, added as one package (issue 36): tests/toy_event/test_toy_event.py
installs it as a distribution's entry point and runs it end to end."""
