#!/bin/bash
# Reference solution: normalise created_at to UTC with datetime(), filter, aggregate per
# (month, category), format cents as a fixed two-decimal string, sort on the integer sum.
set -euo pipefail
cat > /app/report.sql <<'SQL'
WITH counted AS (
    SELECT id, strftime('%Y-%m', datetime(created_at)) AS month
    FROM orders
    WHERE status IN ('paid', 'shipped', 'delivered')
      AND strftime('%Y', datetime(created_at)) = '2023'
),
per_cat AS (
    SELECT c.month, p.category,
           COUNT(DISTINCT c.id) AS orders,
           SUM(i.quantity) AS units,
           SUM(i.quantity * i.unit_price_cents) AS cents
    FROM counted c
    JOIN order_items i ON i.order_id = c.id
    JOIN products p ON p.id = i.product_id
    GROUP BY c.month, p.category
)
SELECT month, category, orders, units,
       printf('%d.%02d', cents / 100, cents % 100) AS revenue
FROM per_cat
ORDER BY month ASC, cents DESC, category ASC;
SQL
sqlite3 -header -csv /app/shop.db < /app/report.sql | head -5
