"""``jobctl demo`` (filled in below)."""
COMMANDS = []
