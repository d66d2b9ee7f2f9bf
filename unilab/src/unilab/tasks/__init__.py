"""Task families, each in its own folder: its terms in `mdp/`, its robot owners in `config/<robot>/`."""
