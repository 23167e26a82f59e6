"""IO capture and replay (seed 002): `capture` runs a command under strace into the store."""
