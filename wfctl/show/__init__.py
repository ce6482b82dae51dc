"""What people see: the read models of describe, list and history, and the terminal's tables,
timeline and live views drawn from them."""
