"""Bronze: landing files kept raw and complete, with where each row came from."""
