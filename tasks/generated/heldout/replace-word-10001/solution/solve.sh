#!/bin/bash
sed -i 's/\bthunder\b/island/g' /app/events.lst
