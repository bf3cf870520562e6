#!/bin/bash
grep -cx river /app/items.log > /app/count.txt
