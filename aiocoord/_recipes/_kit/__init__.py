"""What every recipe family shares: arguments, contenders and their rules, holds, waits."""
