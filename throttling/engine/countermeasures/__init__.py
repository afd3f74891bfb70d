"""Raid countermeasures at request time: the blocks and surges in force, kept in every process."""
