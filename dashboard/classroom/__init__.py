"""The classroom: live polls a teacher opens and students answer, their store and their charts."""
