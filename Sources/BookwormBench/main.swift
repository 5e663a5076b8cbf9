import Bookworm
