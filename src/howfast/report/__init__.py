"""Reports format analysis results; they compute nothing themselves."""
