enum _P {}
