"""howfast: how fast is PostgreSQL on this storage?"""

__version__ = "0.1.0"
