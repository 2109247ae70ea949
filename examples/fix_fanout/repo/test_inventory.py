import unittest

from inventory import names, total_quantity

ITEMS = [{"name": "bolt", "qty": 2}, {"name": "nut", "qty": 3}, {"name": "washer", "qty": 5}]


class InventoryTest(unittest.TestCase):
    def test_total_counts_every_item(self):
        self.assertEqual(total_quantity(ITEMS), 10)

    def test_names_in_order(self):
        self.assertEqual(names(ITEMS), ["bolt", "nut", "washer"])


if __name__ == "__main__":
    unittest.main()
