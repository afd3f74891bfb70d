"""The admin against raids: blocks, surges and alerts, and their forms."""
