"""Generated from proto/ by generate.py: do not edit."""
