"""The base every layer stands on: choices, durations, the words people read, the engine's hooks."""
