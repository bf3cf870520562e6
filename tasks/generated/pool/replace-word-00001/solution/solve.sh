#!/bin/bash
sed -i 's/\bmaple\b/garden/g' /app/items.log
