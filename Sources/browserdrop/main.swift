print("browserdrop: not built yet")
