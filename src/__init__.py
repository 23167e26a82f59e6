more
